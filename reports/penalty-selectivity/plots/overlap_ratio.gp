set terminal pngcairo size 490,320 enhanced font 'Sans,11'
set output "overlap_ratio.png"
set datafile separator ','
set datafile missing 'nan'
set title "VLA writes: overlap with earlier keys" noenhanced
set xlabel "learning rate / steps" noenhanced
set ylabel "MQAR pairs" noenhanced
set xtics ("3e-4/2k" 0, "1e-3/10k" 1, "3e-3/10k" 2)
set ytics ("n = 8" 0, "n = 16" 1, "n = 24" 2)
set xrange [-0.5:2.5]
set yrange [-0.5:2.5]
set cbrange [0:1]
set palette defined (0 '#f7f7f7', 0.5 '#fdae61', 1 '#1a9641')
unset key
plot "overlap_ratio.csv" skip 1 using 1:2:3 with image, "overlap_ratio.csv" skip 1 using 1:2:(sprintf('%.2f', $3)) with labels
