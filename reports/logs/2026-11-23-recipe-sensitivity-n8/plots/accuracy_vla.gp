set terminal pngcairo size 900,560 enhanced font 'Sans,11'
set output "accuracy_vla.png"
set datafile separator ','
set datafile missing 'nan'
set title "VLA: final eval accuracy per seed" noenhanced
set xlabel "recipe (lr/steps); within it n grows left to right" noenhanced
set ylabel "final eval exact match" noenhanced
set grid
set key outside right top noenhanced
set xtics ("3e-4/2k" 0, "3e-4/10k" 1, "1e-3/2k" 2, "1e-3/10k" 3, "3e-3/2k" 4, "3e-3/10k" 5)
set yrange [0:1.05]
set xrange [-0.6:5.6]
set arrow from graph 0, first 0.5 to graph 1, first 0.5 nohead dt 2
plot "accuracy_vla.csv" skip 1 using 1:2 with points pt 7 ps 0.8 lw 2 title "seed 42", \
     "accuracy_vla.csv" skip 1 using 1:3 with points pt 7 ps 0.8 lw 2 title "seed 123", \
     "accuracy_vla.csv" skip 1 using 1:4 with points pt 7 ps 0.8 lw 2 title "seed 999", \
     "accuracy_vla.csv" skip 1 using 1:5 with points pt 7 ps 0.8 lw 2 title "seed 1", \
     "accuracy_vla.csv" skip 1 using 1:6 with points pt 7 ps 0.8 lw 2 title "seed 2"
