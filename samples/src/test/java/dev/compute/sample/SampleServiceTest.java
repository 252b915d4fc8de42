package dev.compute.sample;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import org.springframework.boot.test.context.SpringBootTest;

/**
 * The sample service on a random port, with the configuration of its own application.yml. Every test class
 * annotated so shares one application context (and one manager), which keeps the test run short.
 */
@Target(ElementType.TYPE)
@Retention(RetentionPolicy.RUNTIME)
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = {"compute.memory.leak-detection=paranoid", "sample.load.pause=1ms", "compute.memory.timeline.interval=1s"})
public @interface SampleServiceTest {}
