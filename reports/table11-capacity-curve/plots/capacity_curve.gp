set terminal pngcairo size 900,560 enhanced font 'Sans,11'
set output "capacity_curve.png"
set datafile separator ','
set datafile missing 'nan'
set title "MQAR capacity curve, 1000 steps" noenhanced
set xlabel "n (key-value pairs)" noenhanced
set ylabel "eval exact match" noenhanced
set grid
set key outside right top noenhanced
set yrange [0:1.05]
set arrow from 32, graph 0 to 32, graph 1 nohead dt 2
plot "capacity_curve.csv" skip 1 using 1:2 with linespoints lw 2 title "Softmax (measured, mean)", \
     "capacity_curve.csv" skip 1 using 1:3 with linespoints lw 2 title "Linear (measured, mean)", \
     "capacity_curve.csv" skip 1 using 1:4 with linespoints lw 2 title "DeltaNet (measured, mean)", \
     "capacity_curve.csv" skip 1 using 1:5 with linespoints lw 2 title "VLA (measured, mean)", \
     "capacity_curve.csv" skip 1 using 1:6 with linespoints lw 2 title "Softmax (paper)", \
     "capacity_curve.csv" skip 1 using 1:7 with linespoints lw 2 title "Linear (paper)", \
     "capacity_curve.csv" skip 1 using 1:8 with linespoints lw 2 title "DeltaNet (paper)", \
     "capacity_curve.csv" skip 1 using 1:9 with linespoints lw 2 title "VLA (paper)"
