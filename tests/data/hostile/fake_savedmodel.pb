*
"serve

xPlaceholder*
dtype0