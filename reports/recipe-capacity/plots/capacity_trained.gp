set terminal pngcairo size 900,560 enhanced font 'Sans,11'
set output "capacity_trained.png"
set datafile separator ','
set datafile missing 'nan'
set title "Trained at the best recipe: accuracy vs n / d_h" noenhanced
set xlabel "n / d_h" noenhanced
set ylabel "eval exact match" noenhanced
set grid
set key outside right top noenhanced
set yrange [0:1.05]
set arrow from 1, graph 0 to 1, graph 1 nohead dt 2
plot "capacity_trained.csv" skip 1 using 1:2 with linespoints lw 2 lc rgb '#1b9e77' dt 1 pt 7 title "Softmax d_h = 16", \
     "capacity_trained.csv" skip 1 using 1:3 with linespoints lw 2 lc rgb '#1b9e77' dt 2 pt 5 title "Softmax d_h = 32", \
     "capacity_trained.csv" skip 1 using 1:4 with linespoints lw 2 lc rgb '#1b9e77' dt 3 pt 9 title "Softmax d_h = 64", \
     "capacity_trained.csv" skip 1 using 1:5 with linespoints lw 2 lc rgb '#d95f02' dt 1 pt 7 title "Linear d_h = 16", \
     "capacity_trained.csv" skip 1 using 1:7 with linespoints lw 2 lc rgb '#d95f02' dt 2 pt 5 title "Linear d_h = 32", \
     "capacity_trained.csv" skip 1 using 1:9 with linespoints lw 2 lc rgb '#d95f02' dt 3 pt 9 title "Linear d_h = 64", \
     "capacity_trained.csv" skip 1 using 1:11 with linespoints lw 2 lc rgb '#7570b3' dt 1 pt 7 title "DeltaNet d_h = 16", \
     "capacity_trained.csv" skip 1 using 1:13 with linespoints lw 2 lc rgb '#7570b3' dt 2 pt 5 title "DeltaNet d_h = 32", \
     "capacity_trained.csv" skip 1 using 1:15 with linespoints lw 2 lc rgb '#7570b3' dt 3 pt 9 title "DeltaNet d_h = 64", \
     "capacity_trained.csv" skip 1 using 1:17 with linespoints lw 2 lc rgb '#e7298a' dt 1 pt 7 title "VLA d_h = 16", \
     "capacity_trained.csv" skip 1 using 1:19 with linespoints lw 2 lc rgb '#e7298a' dt 2 pt 5 title "VLA d_h = 32", \
     "capacity_trained.csv" skip 1 using 1:21 with linespoints lw 2 lc rgb '#e7298a' dt 3 pt 9 title "VLA d_h = 64"
