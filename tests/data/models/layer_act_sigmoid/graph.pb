
E
input_0Placeholder*
dtype0* 
shape:ÿÿÿÿÿÿÿÿÿ
E
(functional_23_1/activation_239_1/SigmoidSigmoidinput_0*
T0
G
IdentityIdentity(functional_23_1/activation_239_1/Sigmoid*
T0"ª