set terminal pngcairo size 900,560 enhanced font 'Sans,11'
set output "accuracy_vs_n_3000steps.png"
set datafile separator ','
set datafile missing 'nan'
set title "MQAR, 3000 steps: eval accuracy vs n" noenhanced
set xlabel "n (key-value pairs)" noenhanced
set ylabel "eval exact match" noenhanced
set grid
set key outside right top noenhanced
set yrange [0:1.05]
plot "accuracy_vs_n_3000steps.csv" skip 1 using 1:2 with linespoints lw 2 title "Softmax (measured, mean)", \
     "accuracy_vs_n_3000steps.csv" skip 1 using 1:3 with linespoints lw 2 title "Linear (measured, mean)", \
     "accuracy_vs_n_3000steps.csv" skip 1 using 1:4 with linespoints lw 2 title "DeltaNet (measured, mean)", \
     "accuracy_vs_n_3000steps.csv" skip 1 using 1:5 with linespoints lw 2 title "VLA (measured, mean)", \
     "accuracy_vs_n_3000steps.csv" skip 1 using 1:6 with linespoints lw 2 title "Softmax (paper)", \
     "accuracy_vs_n_3000steps.csv" skip 1 using 1:7 with linespoints lw 2 title "Linear (paper)", \
     "accuracy_vs_n_3000steps.csv" skip 1 using 1:8 with linespoints lw 2 title "DeltaNet (paper)", \
     "accuracy_vs_n_3000steps.csv" skip 1 using 1:9 with linespoints lw 2 title "VLA (paper)"
