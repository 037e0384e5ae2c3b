
E
input_0Placeholder*
dtype0* 
shape:ÿÿÿÿÿÿÿÿÿ
?
%functional_33_1/activation_249_1/TanhTanhinput_0*
T0
D
IdentityIdentity%functional_33_1/activation_249_1/Tanh*
T0"ª