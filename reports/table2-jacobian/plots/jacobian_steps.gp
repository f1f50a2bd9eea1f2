set terminal pngcairo size 900,560 enhanced font 'Sans,11'
set output "jacobian_steps.png"
set datafile separator ','
set datafile missing 'nan'
set title "Per-step Jacobian spectral norm ||dS_t/dS_{t-1}||_2 (closed form)" noenhanced
set xlabel "step t" noenhanced
set ylabel "||J_t||_2 (log scale)" noenhanced
set grid
set key outside right top noenhanced
set logscale y
set format y '10^{%L}'
set yrange [0.5:*]
plot "jacobian_steps.csv" skip 1 using 1:2 with lines lw 2 title "vla-v2_d32", \
     "jacobian_steps.csv" skip 1 using 1:3 with lines lw 2 title "vla-v2_d64", \
     "jacobian_steps.csv" skip 1 using 1:4 with lines lw 2 title "vla-v2_d96", \
     "jacobian_steps.csv" skip 1 using 1:5 with lines lw 2 title "vla-v2_d128", \
     "jacobian_steps.csv" skip 1 using 1:6 with lines lw 2 title "vla_d32", \
     "jacobian_steps.csv" skip 1 using 1:7 with lines lw 2 title "vla_d64", \
     "jacobian_steps.csv" skip 1 using 1:8 with lines lw 2 title "vla_d96", \
     "jacobian_steps.csv" skip 1 using 1:9 with lines lw 2 title "vla_d128"
