set terminal pngcairo size 900,560 enhanced font 'Sans,11'
set output "recovery_correlated_double.png"
set datafile separator ','
set datafile missing 'nan'
set title "Recovery error after n writes, correlated keys, d_h = 32 (double)" noenhanced
set xlabel "n / d_h" noenhanced
set ylabel "max_i ||S_n k_i - v_i|| / ||v_i|| (log scale)" noenhanced
set grid
set key outside right top noenhanced
set logscale y
set format y '10^{%L}'
set yrange [1e-17:*]
plot "recovery_correlated_double.csv" skip 1 using 2:3 with linespoints lw 2 title "vla", \
     "recovery_correlated_double.csv" skip 1 using 2:4 with linespoints lw 2 title "vla-v2", \
     "recovery_correlated_double.csv" skip 1 using 2:5 with linespoints lw 2 title "vla-rls", \
     "recovery_correlated_double.csv" skip 1 using 2:6 with linespoints lw 2 title "vla-fixed-a", \
     "recovery_correlated_double.csv" skip 1 using 2:7 with linespoints lw 2 title "vla-no-knorm", \
     "recovery_correlated_double.csv" skip 1 using 2:8 with linespoints lw 2 title "vla-key", \
     "recovery_correlated_double.csv" skip 1 using 2:9 with linespoints lw 2 title "rls-classical", \
     "recovery_correlated_double.csv" skip 1 using 2:10 with linespoints lw 2 title "deltanet", \
     "recovery_correlated_double.csv" skip 1 using 2:11 with linespoints lw 2 title "linear", \
     "recovery_correlated_double.csv" skip 1 using 2:12 with linespoints lw 2 title "least-squares"
