set terminal pngcairo size 900,560 enhanced font 'Sans,11'
set output "capacity_untrained.png"
set datafile separator ','
set datafile missing 'nan'
set title "Untrained (Prop. 3): recovery error vs n / d_h" noenhanced
set xlabel "n / d_h" noenhanced
set ylabel "max relative error" noenhanced
set grid
set key outside right top noenhanced
set logscale y
set format y '10^{%L}'
set arrow from 1, graph 0 to 1, graph 1 nohead dt 2
plot "capacity_untrained.csv" skip 1 using 1:6 with linespoints lw 2 lc rgb '#d95f02' dt 1 pt 7 title "Linear d_h = 16", \
     "capacity_untrained.csv" skip 1 using 1:8 with linespoints lw 2 lc rgb '#d95f02' dt 2 pt 5 title "Linear d_h = 32", \
     "capacity_untrained.csv" skip 1 using 1:10 with linespoints lw 2 lc rgb '#d95f02' dt 3 pt 9 title "Linear d_h = 64", \
     "capacity_untrained.csv" skip 1 using 1:12 with linespoints lw 2 lc rgb '#7570b3' dt 1 pt 7 title "DeltaNet d_h = 16", \
     "capacity_untrained.csv" skip 1 using 1:14 with linespoints lw 2 lc rgb '#7570b3' dt 2 pt 5 title "DeltaNet d_h = 32", \
     "capacity_untrained.csv" skip 1 using 1:16 with linespoints lw 2 lc rgb '#7570b3' dt 3 pt 9 title "DeltaNet d_h = 64", \
     "capacity_untrained.csv" skip 1 using 1:18 with linespoints lw 2 lc rgb '#e7298a' dt 1 pt 7 title "VLA d_h = 16", \
     "capacity_untrained.csv" skip 1 using 1:20 with linespoints lw 2 lc rgb '#e7298a' dt 2 pt 5 title "VLA d_h = 32", \
     "capacity_untrained.csv" skip 1 using 1:22 with linespoints lw 2 lc rgb '#e7298a' dt 3 pt 9 title "VLA d_h = 64"
