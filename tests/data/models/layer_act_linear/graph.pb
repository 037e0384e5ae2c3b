
E
input_0Placeholder*
dtype0* 
shape:ÿÿÿÿÿÿÿÿÿ
&
IdentityIdentityinput_0*
T0"ª