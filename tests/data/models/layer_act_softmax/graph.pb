
E
input_0Placeholder*
dtype0* 
shape:ÿÿÿÿÿÿÿÿÿ
E
(functional_26_1/activation_242_1/SoftmaxSoftmaxinput_0*
T0
G
IdentityIdentity(functional_26_1/activation_242_1/Softmax*
T0"ª