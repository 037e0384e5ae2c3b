
M
input_0Placeholder*
dtype0*(
shape:ÿÿÿÿÿÿÿÿÿ

)functional_17_1/max_pooling3d_1/MaxPool3D	MaxPool3Dinput_0*
data_formatNDHWC*
paddingSAME*
ksize	
*
strides	
*
T0
Ä
-functional_17_1/average_pooling3d_1/AvgPool3D	AvgPool3D)functional_17_1/max_pooling3d_1/MaxPool3D*
data_formatNDHWC*
paddingVALID*
ksize	
*
strides	
*
T0
L
IdentityIdentity-functional_17_1/average_pooling3d_1/AvgPool3D*
T0"ª