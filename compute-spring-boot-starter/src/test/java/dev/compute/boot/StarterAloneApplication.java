package dev.compute.boot;

import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.lang.ref.Reference;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Configuration;

/**
 * The smallest application of a user whose one dependency is the starter: auto-configuration and nothing else (no
 * component scan, which would find the starter's own classes in this package). It leaves one buffer open, as a
 * service stopped mid-request would, so that closing the context makes the manager report it. {@link StarterAloneTests}
 * runs it.
 */
@Configuration(proxyBeanMethods = false)
@EnableAutoConfiguration
class StarterAloneApplication {

    public static void main(String[] args) {
        ConfigurableApplicationContext context = SpringApplication.run(StarterAloneApplication.class, args);
        UnifiedBuffer open = context.getBean(UnifiedMemoryManager.class).allocate(4096); // never closed: the shutdown report names it
        context.close();
        Reference.reachabilityFence(open); // open, not garbage-collected (a leak, reported as such) before the close
    }
}
