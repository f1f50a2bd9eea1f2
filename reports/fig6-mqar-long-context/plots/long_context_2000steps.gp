set terminal pngcairo size 900,560 enhanced font 'Sans,11'
set output "long_context_2000steps.png"
set datafile separator ','
set datafile missing 'nan'
set title "MQAR n = 8 against T, 2000 steps (Fig. 6)" noenhanced
set xlabel "T (tokens)" noenhanced
set ylabel "eval exact match" noenhanced
set grid
set key outside right top noenhanced
set logscale x
set yrange [0:1.05]
plot "long_context_2000steps.csv" skip 1 using 1:2 with linespoints lw 2 title "Softmax (measured, mean)", \
     "long_context_2000steps.csv" skip 1 using 1:3 with linespoints lw 2 title "Linear (measured, mean)", \
     "long_context_2000steps.csv" skip 1 using 1:4 with linespoints lw 2 title "DeltaNet (measured, mean)", \
     "long_context_2000steps.csv" skip 1 using 1:5 with linespoints lw 2 title "VLA (measured, mean)", \
     "long_context_2000steps.csv" skip 1 using 1:6 with linespoints lw 2 title "Softmax (paper)", \
     "long_context_2000steps.csv" skip 1 using 1:7 with linespoints lw 2 title "Linear (paper)", \
     "long_context_2000steps.csv" skip 1 using 1:8 with linespoints lw 2 title "DeltaNet (paper)", \
     "long_context_2000steps.csv" skip 1 using 1:9 with linespoints lw 2 title "VLA (paper)"
