set terminal pngcairo size 900,560 enhanced font 'Sans,11'
set output "A_norms.png"
set datafile separator ','
set datafile missing 'nan'
set title "||A_t||_F (VLA inverse penalty)" noenhanced
set xlabel "token t" noenhanced
set ylabel "||A_t||_F (log scale)" noenhanced
set grid
set key outside right top noenhanced
set logscale y
set format y '10^{%L}'
plot "A_norms.csv" skip 1 using 1:2 with lines lw 2 title "vla_A_fro"
