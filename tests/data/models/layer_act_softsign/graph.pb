
E
input_0Placeholder*
dtype0* 
shape:ÿÿÿÿÿÿÿÿÿ
G
)functional_28_1/activation_244_1/SoftsignSoftsigninput_0*
T0
H
IdentityIdentity)functional_28_1/activation_244_1/Softsign*
T0"ª