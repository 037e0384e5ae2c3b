
E
input_0Placeholder*
dtype0* 
shape:ÿÿÿÿÿÿÿÿÿ
G
)functional_19_1/activation_235_1/SoftplusSoftplusinput_0*
T0
a
%functional_19_1/activation_235_1/TanhTanh)functional_19_1/activation_235_1/Softplus*
T0
d
$functional_19_1/activation_235_1/mulMulinput_0%functional_19_1/activation_235_1/Tanh*
T0
C
IdentityIdentity$functional_19_1/activation_235_1/mul*
T0"ª