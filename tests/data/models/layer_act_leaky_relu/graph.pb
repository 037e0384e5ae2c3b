
E
input_0Placeholder*
dtype0* 
shape:ÿÿÿÿÿÿÿÿÿ
Y
*functional_15_1/activation_231_1/LeakyRelu	LeakyReluinput_0*
T0*
alpha%ÍÌL>
I
IdentityIdentity*functional_15_1/activation_231_1/LeakyRelu*
T0"ª