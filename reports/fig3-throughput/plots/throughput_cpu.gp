set terminal pngcairo size 900,560 enhanced font 'Sans,11'
set output "throughput_cpu.png"
set datafile separator ','
set datafile missing 'nan'
set title "Forward throughput vs T (CPU)" noenhanced
set xlabel "T" noenhanced
set ylabel "tokens / s" noenhanced
set grid
set key outside right top noenhanced
set logscale y
set format y '10^{%L}'
set logscale x
plot "throughput_cpu.csv" skip 1 using 1:2 with linespoints lw 2 title "Softmax", \
     "throughput_cpu.csv" skip 1 using 1:3 with linespoints lw 2 title "Linear", \
     "throughput_cpu.csv" skip 1 using 1:4 with linespoints lw 2 title "DeltaNet", \
     "throughput_cpu.csv" skip 1 using 1:5 with linespoints lw 2 title "VLA"
