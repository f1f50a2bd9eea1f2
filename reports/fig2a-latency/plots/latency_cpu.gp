set terminal pngcairo size 900,560 enhanced font 'Sans,11'
set output "latency_cpu.png"
set datafile separator ','
set datafile missing 'nan'
set title "Forward latency vs T (CPU, float)" noenhanced
set xlabel "T" noenhanced
set ylabel "ms per forward" noenhanced
set grid
set key outside right top noenhanced
set logscale y
set format y '10^{%L}'
set logscale x
plot "latency_cpu.csv" skip 1 using 1:2 with linespoints lw 2 title "Softmax", \
     "latency_cpu.csv" skip 1 using 1:3 with linespoints lw 2 title "Linear", \
     "latency_cpu.csv" skip 1 using 1:4 with linespoints lw 2 title "DeltaNet", \
     "latency_cpu.csv" skip 1 using 1:5 with linespoints lw 2 title "VLA"
