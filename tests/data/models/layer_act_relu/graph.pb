
E
input_0Placeholder*
dtype0* 
shape:ÿÿÿÿÿÿÿÿÿ
?
%functional_20_1/activation_236_1/ReluReluinput_0*
T0
D
IdentityIdentity%functional_20_1/activation_236_1/Relu*
T0"ª