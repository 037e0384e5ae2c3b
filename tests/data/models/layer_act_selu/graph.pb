
E
input_0Placeholder*
dtype0* 
shape:ÿÿÿÿÿÿÿÿÿ
?
%functional_22_1/activation_238_1/SeluSeluinput_0*
T0
D
IdentityIdentity%functional_22_1/activation_238_1/Selu*
T0"ª