set terminal pngcairo size 900,560 enhanced font 'Sans,11'
set output "state_norms.png"
set datafile separator ','
set datafile missing 'nan'
set title "||S_t||_F at inference, random inputs (mean over seeds)" noenhanced
set xlabel "t" noenhanced
set ylabel "||S_t||_F" noenhanced
set grid
set key outside right top noenhanced
set logscale y
set format y '10^{%L}'
plot "state_norms.csv" skip 1 using 1:2 with lines lw 2 title "linear attention", \
     "state_norms.csv" skip 1 using 1:3 with lines lw 2 title "DeltaNet", \
     "state_norms.csv" skip 1 using 1:4 with lines lw 2 title "VLA"
