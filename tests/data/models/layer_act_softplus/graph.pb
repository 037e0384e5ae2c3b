
E
input_0Placeholder*
dtype0* 
shape:ÿÿÿÿÿÿÿÿÿ
G
)functional_27_1/activation_243_1/SoftplusSoftplusinput_0*
T0
H
IdentityIdentity)functional_27_1/activation_243_1/Softplus*
T0"ª