package dev.compute.boot.actuate.memorymap;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import org.junit.jupiter.api.Test;
import org.springframework.aot.generate.ClassNameGenerator;
import org.springframework.aot.generate.DefaultGenerationContext;
import org.springframework.aot.generate.GenerationContext;
import org.springframework.aot.generate.InMemoryGeneratedFiles;
import org.springframework.aot.hint.RuntimeHints;
import org.springframework.aot.hint.predicate.RuntimeHintsPredicates;
import org.springframework.context.annotation.AnnotatedBeanDefinitionReader;
import org.springframework.context.aot.ApplicationContextAotGenerator;
import org.springframework.core.io.Resource;
import org.springframework.core.io.support.PathMatchingResourcePatternResolver;
import org.springframework.javapoet.ClassName;
import org.springframework.web.context.support.GenericWebApplicationContext;

/**
 * Every file of the memory map page in the jar is registered for a native image, and nothing else is; ahead-of-time
 * processing of an application that serves the page registers them.
 */
class MemoryMapPageRuntimeHintsTests {

    private final RuntimeHints hints = new RuntimeHints();

    @Test
    void registersEveryFileOfThePage() throws IOException {
        new MemoryMapPageRuntimeHints().registerHints(hints, getClass().getClassLoader());

        Resource[] files = new PathMatchingResourcePatternResolver()
                .getResources("classpath*:" + ComputeMemoryMapEndpoint.LOCATION + "*");
        assertThat(files).extracting(Resource::getFilename).contains("index.html", "memory-map.js", "memory-map.css");
        for (Resource file : files) {
            String path = ComputeMemoryMapEndpoint.LOCATION + file.getFilename();
            assertThat(RuntimeHintsPredicates.resource().forResource(path)).as(path).accepts(hints);
        }
        assertThat(RuntimeHintsPredicates.resource().forResource("META-INF/spring.factories")).rejects(hints);
    }

    @Test
    void aheadOfTimeProcessingOfAServletApplicationRegistersThem() {
        GenericWebApplicationContext context = new GenericWebApplicationContext();
        new AnnotatedBeanDefinitionReader(context).register(ComputeMemoryMapEndpoint.class);
        GenerationContext generation = new DefaultGenerationContext(
                new ClassNameGenerator(ClassName.get(getClass())), new InMemoryGeneratedFiles());

        new ApplicationContextAotGenerator().processAheadOfTime(context, generation);

        assertThat(RuntimeHintsPredicates.resource().forResource(ComputeMemoryMapEndpoint.LOCATION + "index.html"))
                .accepts(generation.getRuntimeHints());
    }
}
