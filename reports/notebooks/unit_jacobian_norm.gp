set terminal pngcairo size 900,560 enhanced font 'Sans,11'
set output "unit_jacobian_norm.png"
set datafile separator ','
set datafile missing 'nan'
set title "||I - alpha_hat k_hat^T||_2 for unit vectors" noenhanced
set xlabel "p = k_hat . alpha_hat" noenhanced
set ylabel "spectral norm" noenhanced
set grid
set key outside right top noenhanced
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2
plot "unit_jacobian_norm.csv" skip 1 using 1:2 with lines lw 2 title "closed form", \
     "unit_jacobian_norm.csv" skip 1 using 1:3 with lines lw 2 title "JacobiSVD"
