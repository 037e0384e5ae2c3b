
E
input_0Placeholder*
dtype0* 
shape:ÿÿÿÿÿÿÿÿÿ
A
&functional_21_1/activation_237_1/Relu6Relu6input_0*
T0
E
IdentityIdentity&functional_21_1/activation_237_1/Relu6*
T0"ª