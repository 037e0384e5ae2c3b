
E
input_0Placeholder*
dtype0* 
shape:ÿÿÿÿÿÿÿÿÿ
K
+functional_18_1/activation_234_1/LogSoftmax
LogSoftmaxinput_0*
T0
J
IdentityIdentity+functional_18_1/activation_234_1/LogSoftmax*
T0"ª