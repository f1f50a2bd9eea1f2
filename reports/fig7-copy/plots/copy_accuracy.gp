set terminal pngcairo size 900,560 enhanced font 'Sans,11'
set output "copy_accuracy.png"
set datafile separator ','
set datafile missing 'nan'
set title "Copy task (T = 64): eval accuracy vs step" noenhanced
set xlabel "step" noenhanced
set ylabel "eval exact match" noenhanced
set grid
set key outside right top noenhanced
set yrange [0:1.05]
plot "copy_accuracy.csv" skip 1 using 1:2 with lines lw 2 title "Softmax", \
     "copy_accuracy.csv" skip 1 using 1:3 with lines lw 2 title "Linear", \
     "copy_accuracy.csv" skip 1 using 1:4 with lines lw 2 title "DeltaNet", \
     "copy_accuracy.csv" skip 1 using 1:5 with lines lw 2 title "VLA"
