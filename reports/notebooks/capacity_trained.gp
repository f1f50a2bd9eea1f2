set terminal pngcairo size 900,560 enhanced font 'Sans,11'
set output "capacity_trained.png"
set datafile separator ','
set datafile missing 'nan'
set title "MQAR eval accuracy vs n / d_h (d_h = 8, 600 steps)" noenhanced
set xlabel "n / d_h" noenhanced
set ylabel "eval exact match" noenhanced
set grid
set key outside right top noenhanced
set yrange [0:1.05]
set arrow from 1, graph 0 to 1, graph 1 nohead dt 2
plot "capacity_trained.csv" skip 1 using 1:2 with linespoints lw 2 title "VLA", \
     "capacity_trained.csv" skip 1 using 1:3 with linespoints lw 2 title "DeltaNet", \
     "capacity_trained.csv" skip 1 using 1:4 with linespoints lw 2 title "linear attention"
