set terminal pngcairo size 900,560 enhanced font 'Sans,11'
set output "log_n16.png"
set datafile separator ','
set datafile missing 'nan'
set title "VLA, MQAR n = 16: eval accuracy vs step" noenhanced
set xlabel "step" noenhanced
set ylabel "eval exact match" noenhanced
set grid
set key outside right top noenhanced
set yrange [0:1.05]
plot "log_n16.csv" skip 1 using 1:2 with linespoints lw 2 title "measured (mean over seeds)", \
     "log_n16.csv" skip 1 using 1:3 with linespoints lw 2 title "paper (Table 8, seed 42)"
