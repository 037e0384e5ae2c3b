
E
input_0Placeholder*
dtype0* 
shape:ÿÿÿÿÿÿÿÿÿ
H
/functional_17_1/activation_233_1/LogSigmoid/NegNeginput_0*
T0
z
4functional_17_1/activation_233_1/LogSigmoid/SoftplusSoftplus/functional_17_1/activation_233_1/LogSigmoid/Neg*
T0
q
+functional_17_1/activation_233_1/LogSigmoidNeg4functional_17_1/activation_233_1/LogSigmoid/Softplus*
T0
J
IdentityIdentity+functional_17_1/activation_233_1/LogSigmoid*
T0"ª