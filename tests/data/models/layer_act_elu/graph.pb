
E
input_0Placeholder*
dtype0* 
shape:ÿÿÿÿÿÿÿÿÿ
<
#functional_7_1/activation_223_1/EluEluinput_0*
T0
B
IdentityIdentity#functional_7_1/activation_223_1/Elu*
T0"ª