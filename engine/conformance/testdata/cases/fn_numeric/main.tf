output "numeric_functions" {
  value = {
    abs      = abs(-12.5)
    ceil     = ceil(4.1)
    floor    = floor(-4.1)
    log      = log(16, 2)
    max      = max(3, 12, 7)
    min      = min(3, 12, 7)
    parseint = parseint("ff", 16)
    parsebin = parseint("-1010", 2)
    pow      = pow(2, 10)
    signum   = signum(-3)
    sum      = sum([1, 2.5, 3])
    division = 10 / 4
    modulo   = 10 % 4
    big      = 9007199254740993 + 2
  }
}
