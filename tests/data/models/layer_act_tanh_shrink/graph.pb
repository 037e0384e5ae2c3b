
E
input_0Placeholder*
dtype0* 
shape:ÿÿÿÿÿÿÿÿÿ
?
%functional_34_1/activation_250_1/TanhTanhinput_0*
T0
d
$functional_34_1/activation_250_1/subSubinput_0%functional_34_1/activation_250_1/Tanh*
T0
C
IdentityIdentity$functional_34_1/activation_250_1/sub*
T0"ª