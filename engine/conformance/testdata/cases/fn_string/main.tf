locals {
  s   = "  Hello, World  "
  tpl = "Hi $${name}!"
}

output "string_functions" {
  value = {
    chomp       = chomp("line\n\n")
    endswith    = endswith("stackd", "kd")
    format      = format("%s-%03d-%.2f-%t-%q", "x", 7, 3.14159, true, "q")
    formatlist  = formatlist("%s=%d", ["a", "b"], [1, 2])
    indent      = indent(2, "a\nb\nc")
    join        = join("/", ["a", "b", "c"])
    lower       = lower("MiXeD")
    regex       = regex("^(?P<user>[a-z]+)@(?P<host>[a-z.]+)$", "ann@example.com")
    regex_plain = regex("[0-9]+", "abc123def")
    regexall    = regexall("[a-z]([0-9])", "a1 b2 c3")
    replace     = replace("hello world", "o", "0")
    replace_re  = replace("a1b22c333", "/[0-9]+/", "#")
    replace_ref = replace("john smith", "/(\\w+) (\\w+)/", "$2, $1")
    split       = split(",", "a,b,,c")
    startswith  = startswith("stackd", "st")
    strcontains = strcontains("conformance", "form")
    strrev      = strrev("abc")
    substr      = substr("hello world", 1, 4)
    substr_neg  = substr("hello world", -5, -1)
    title       = title("hello world")
    trim        = trim("?!hello?!", "!?")
    trimprefix  = trimprefix("helloworld", "hello")
    trimsuffix  = trimsuffix("helloworld", "world")
    trimspace   = trimspace(local.s)
    upper       = upper("up")
    templatestr = templatestring(local.tpl, { name = "ann" })
  }
}
