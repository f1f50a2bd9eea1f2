set terminal pngcairo size 900,560 enhanced font 'Sans,11'
set output "copy_loss.png"
set datafile separator ','
set datafile missing 'nan'
set title "Copy task (T = 64): training loss vs step" noenhanced
set xlabel "step" noenhanced
set ylabel "cross-entropy" noenhanced
set grid
set key outside right top noenhanced
set logscale y
set format y '10^{%L}'
plot "copy_loss.csv" skip 1 using 1:6 with lines lw 2 title "Softmax", \
     "copy_loss.csv" skip 1 using 1:7 with lines lw 2 title "Linear", \
     "copy_loss.csv" skip 1 using 1:8 with lines lw 2 title "DeltaNet", \
     "copy_loss.csv" skip 1 using 1:9 with lines lw 2 title "VLA"
