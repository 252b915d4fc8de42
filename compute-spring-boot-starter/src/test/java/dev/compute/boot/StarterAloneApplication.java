package dev.compute.boot;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.annotation.Configuration;

/**
 * The smallest application of a user whose one dependency is the starter: auto-configuration and nothing else (no
 * component scan, which would find the starter's own classes in this package). {@link StarterAloneTests} runs it.
 */
@Configuration(proxyBeanMethods = false)
@EnableAutoConfiguration
class StarterAloneApplication {

    public static void main(String[] args) {
        SpringApplication.run(StarterAloneApplication.class, args).close();
    }
}
