set terminal pngcairo size 900,560 enhanced font 'Sans,11'
set output "state_norms.png"
set datafile separator ','
set datafile missing 'nan'
set title "||S_t||_F, d_h = 32, mean over 3 seeds" noenhanced
set xlabel "token t" noenhanced
set ylabel "||S_t||_F (log scale)" noenhanced
set grid
set key outside right top noenhanced
set logscale y
set format y '10^{%L}'
plot "state_norms.csv" skip 1 using 1:2 with lines lw 2 title "linear", \
     "state_norms.csv" skip 1 using 1:3 with lines lw 2 title "deltanet", \
     "state_norms.csv" skip 1 using 1:4 with lines lw 2 title "vla"
