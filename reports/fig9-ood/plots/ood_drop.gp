set terminal pngcairo size 900,560 enhanced font 'Sans,11'
set output "ood_drop.png"
set datafile separator ','
set datafile missing 'nan'
set title "Accuracy drop ID - OOD" noenhanced
set xlabel "n" noenhanced
set ylabel "drop (ID - OOD)" noenhanced
set grid
set key outside right top noenhanced
set arrow from graph 0, first 0.05 to graph 1, first 0.05 nohead dt 2
plot "ood_drop.csv" skip 1 using 1:4 with linespoints lw 2 title "Softmax", \
     "ood_drop.csv" skip 1 using 1:7 with linespoints lw 2 title "Linear", \
     "ood_drop.csv" skip 1 using 1:10 with linespoints lw 2 title "DeltaNet", \
     "ood_drop.csv" skip 1 using 1:13 with linespoints lw 2 title "VLA"
