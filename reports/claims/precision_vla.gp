set terminal pngcairo size 900,560 enhanced font 'Sans,11'
set output "precision_vla.png"
set datafile separator ','
set datafile missing 'nan'
set title "vla: output error vs mp50 (d_h = 32, policy clamp)" noenhanced
set xlabel "token t" noenhanced
set ylabel "||o_t - o_t^{mp50}|| / ||o_t^{mp50}|| (log scale)" noenhanced
set grid
set key outside right top noenhanced
set logscale y
set format y '10^{%L}'
plot "precision_vla.csv" skip 1 using 1:2 with lines lw 2 title "half", \
     "precision_vla.csv" skip 1 using 1:3 with lines lw 2 title "bfloat16", \
     "precision_vla.csv" skip 1 using 1:4 with lines lw 2 title "float", \
     "precision_vla.csv" skip 1 using 1:5 with lines lw 2 title "double", \
     "precision_vla.csv" skip 1 using 1:6 with lines lw 2 title "half+float", \
     "precision_vla.csv" skip 1 using 1:7 with lines lw 2 title "bfloat16+float"
