set terminal pngcairo size 900,560 enhanced font 'Sans,11'
set output "ood_accuracy.png"
set datafile separator ','
set datafile missing 'nan'
set title "MQAR, 1000 steps: ID (solid) and OOD keys (dashed)" noenhanced
set xlabel "n" noenhanced
set ylabel "eval exact match" noenhanced
set grid
set key outside right top noenhanced
set yrange [0:1.05]
plot "ood_accuracy.csv" skip 1 using 1:2 with linespoints lw 2 title "Softmax ID", \
     "ood_accuracy.csv" skip 1 using 1:3 with linespoints lw 2 title "Softmax OOD", \
     "ood_accuracy.csv" skip 1 using 1:5 with linespoints lw 2 title "Linear ID", \
     "ood_accuracy.csv" skip 1 using 1:6 with linespoints lw 2 title "Linear OOD", \
     "ood_accuracy.csv" skip 1 using 1:8 with linespoints lw 2 title "DeltaNet ID", \
     "ood_accuracy.csv" skip 1 using 1:9 with linespoints lw 2 title "DeltaNet OOD", \
     "ood_accuracy.csv" skip 1 using 1:11 with linespoints lw 2 title "VLA ID", \
     "ood_accuracy.csv" skip 1 using 1:12 with linespoints lw 2 title "VLA OOD"
