set terminal pngcairo size 900,560 enhanced font 'Sans,11'
set output "penalty_directions.png"
set datafile separator ','
set datafile missing 'nan'
set title "How parallel the heads' directions become in training (MQAR n = 8, lr 1e-3)" noenhanced
set xlabel "training step" noenhanced
set ylabel "mean |cos| over token pairs" noenhanced
set grid
set key outside right top noenhanced
set yrange [0:1.05]
set key bottom right
plot "penalty_directions.csv" skip 1 using 1:3 with linespoints lw 2 title "layer 0: penalty directions u", \
     "penalty_directions.csv" skip 1 using 1:4 with linespoints lw 2 title "layer 1: penalty directions u", \
     "penalty_directions.csv" skip 1 using 1:5 with linespoints lw 2 title "layer 0: keys k", \
     "penalty_directions.csv" skip 1 using 1:6 with linespoints lw 2 title "layer 1: keys k"
