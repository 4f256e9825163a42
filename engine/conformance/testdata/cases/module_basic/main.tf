module "hello" {
  source   = "./modules/greeting"
  greeting = "hello"
  names    = ["ann", "bob"]
}

module "default_greeting" {
  source = "./modules/greeting"
  names  = [module.hello.first]
}

output "messages" { value = module.hello.messages }
output "chained" { value = module.default_greeting.messages }
