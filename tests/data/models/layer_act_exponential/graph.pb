
E
input_0Placeholder*
dtype0* 
shape:ÿÿÿÿÿÿÿÿÿ
<
#functional_8_1/activation_224_1/ExpExpinput_0*
T0
B
IdentityIdentity#functional_8_1/activation_224_1/Exp*
T0"ª