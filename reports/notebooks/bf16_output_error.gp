set terminal pngcairo size 900,560 enhanced font 'Sans,11'
set output "bf16_output_error.png"
set datafile separator ','
set datafile missing 'nan'
set title "VLA output error vs mp50" noenhanced
set xlabel "t" noenhanced
set ylabel "relative error of o_t" noenhanced
set grid
set key outside right top noenhanced
set logscale y
set format y '10^{%L}'
plot "bf16_output_error.csv" skip 1 using 1:2 with lines lw 2 title "bfloat16_clamp", \
     "bf16_output_error.csv" skip 1 using 1:3 with lines lw 2 title "float_clamp", \
     "bf16_output_error.csv" skip 1 using 1:4 with lines lw 2 title "bfloat16_skip", \
     "bf16_output_error.csv" skip 1 using 1:5 with lines lw 2 title "bfloat16_no-refresh", \
     "bf16_output_error.csv" skip 1 using 1:6 with lines lw 2 title "bfloat16_renorm"
