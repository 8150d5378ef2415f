// Files the build bundles as text: `import page from './page.html'`.
declare module '*.html' {
  const text: string;
  export default text;
}
declare module '*.txt' {
  const text: string;
  export default text;
}
