set terminal pngcairo size 820,380 enhanced font 'Sans,11'
set output "escape_vla.png"
set datafile separator ','
set datafile missing 'nan'
set title "VLA: fraction of seeds leaving the plateau" noenhanced
set xlabel "learning rate / steps" noenhanced
set ylabel "MQAR pairs" noenhanced
set xtics ("3e-4/2k" 0, "3e-4/10k" 1, "1e-3/2k" 2, "1e-3/10k" 3, "3e-3/2k" 4, "3e-3/10k" 5)
set ytics ("n = 8" 0, "n = 16" 1, "n = 24" 2, "n = 32" 3)
set xrange [-0.5:5.5]
set yrange [-0.5:3.5]
set cbrange [0:1]
set palette defined (0 '#f7f7f7', 0.5 '#fdae61', 1 '#1a9641')
unset key
plot "escape_vla.csv" skip 1 using 1:2:3 with image, "escape_vla.csv" skip 1 using 1:2:(sprintf('%.2f', $3)) with labels
