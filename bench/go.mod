module github.com/playhead/playhead/bench

go 1.26.8

replace github.com/playhead/playhead => ../
