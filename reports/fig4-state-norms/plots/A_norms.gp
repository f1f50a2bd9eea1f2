set terminal pngcairo size 900,560 enhanced font 'Sans,11'
set output "A_norms.png"
set datafile separator ','
set datafile missing 'nan'
set title "VLA ||A_t||_F (mean over seeds)" noenhanced
set xlabel "t" noenhanced
set ylabel "||A_t||_F" noenhanced
set grid
set key outside right top noenhanced
plot "A_norms.csv" skip 1 using 1:5 with lines lw 2 title "VLA ||A_t||_F"
